# Included at the end of tests/CMakeLists.txt in a sanitizer build
# (MPIDDP_SANITIZE set): every test of this directory runs with the options
# below, so plain `ctest` in that build directory is the sanitizer check.
#
# - ASan and LeakSanitizer reports go to one file per process in
#   sanitizer-reports/, named after the test; the test sanitizer_reports (a
#   fixture cleanup every test requires) prints them and fails when there is
#   any, even where a script swallowed the exit code of a job it expected to
#   fail (test_bad_inputs does). Each report also fails its own process.
# - UBSan reports stay on the process's standard error: with GCC's separate
#   libubsan, log_path does not reach it. Every UB aborts the process
#   (-fno-sanitize-recover), and expect_error in tests/integration/lib.sh fails
#   on a "runtime error:" in the output of a job it expected to fail.
# - Leaks are detected; Open MPI's own are suppressed by library name in
#   lsan.supp. Matching a library name needs the slow unwinder at malloc time
#   (fast_unwind_on_malloc=0), as those libraries have no frame pointers; it
#   costs about 1-2 s per MPI process, the leak check at exit 3-10 s more.
# - SIGBUS is left to the process (handle_sigbus=0): mpiddp's memory-mapped reads
#   catch it (src/io/mapped_reads.hpp), and the unit test checks in child
#   processes that any other SIGBUS still ends the process; ASan's own handler
#   would file those intended deaths as reports.
# - Nothing else is needed for Open MPI 4.1 here: no ODR or link-order
#   complaints (mpirun itself is not instrumented).
set(MPIDDP_SANITIZER_REPORTS ${CMAKE_BINARY_DIR}/sanitizer-reports)
set(MPIDDP_SANITIZER_DIR ${CMAKE_CURRENT_LIST_DIR})

get_property(mpiddp_sanitized_tests DIRECTORY PROPERTY TESTS)
foreach(test ${mpiddp_sanitized_tests})
  set(log "log_path=${MPIDDP_SANITIZER_REPORTS}/${test}:log_exe_name=1")
  set_property(TEST ${test} APPEND PROPERTY ENVIRONMENT
    "ASAN_OPTIONS=${log}:detect_leaks=1:fast_unwind_on_malloc=0:handle_sigbus=0"
    "LSAN_OPTIONS=suppressions=${MPIDDP_SANITIZER_DIR}/lsan.supp:print_suppressions=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    # Open MPI's own grace before it SIGKILLs the ranks of a failed job (the other
    # builds' tests use 0, see tests/CMakeLists.txt): a rank that is still running
    # its leak check at exit keeps the time it had before.
    "OMPI_MCA_odls_base_sigkill_timeout=1")
  set_property(TEST ${test} APPEND PROPERTY FIXTURES_REQUIRED sanitizer_reports)
endforeach()

add_test(NAME sanitizer_reports_clear COMMAND bash ${MPIDDP_SANITIZER_DIR}/reports.sh clear ${MPIDDP_SANITIZER_REPORTS})
add_test(NAME sanitizer_reports COMMAND bash ${MPIDDP_SANITIZER_DIR}/reports.sh check ${MPIDDP_SANITIZER_REPORTS})
set_tests_properties(sanitizer_reports_clear PROPERTIES FIXTURES_SETUP sanitizer_reports)
set_tests_properties(sanitizer_reports PROPERTIES FIXTURES_CLEANUP sanitizer_reports)
