# Spack recipe for mpiddp (Spack 1.x). Put it in a package repository as
# packages/mpiddp/package.py (docs/spack.md shows the set-up).
import os

from spack_repo.builtin.build_systems.cmake import CMakePackage
from spack_repo.builtin.build_systems.cuda import CudaPackage

from spack.package import *


class Mpiddp(CMakePackage, CudaPackage):
    """MPI-native data-parallel neural-network trainer: PyTorch DistributedDataParallel
    semantics (bucketed gradient all-reduce, DistributedSampler order, bit-exact
    resume) in one C++ binary, for Slurm clusters, with HDF5-sharded data sets."""

    homepage = "https://github.com/mpiddp/mpiddp"
    git = "https://github.com/mpiddp/mpiddp.git"

    maintainers("mpiddp")
    license("MIT")

    # No release is tagged yet. When one is, add it as
    # version("X.Y.Z", tag="vX.Y.Z", commit="<the tag's full commit hash>")
    # and drop preferred=True here.
    version("main", branch="main", preferred=True)

    variant("nccl", default=True, when="+cuda", description="NCCL all-reduce between GPUs")
    variant("cudnn", default=True, when="+cuda", description="cuDNN convolutions (conv2d layers on the GPU)")
    variant("onednn", default=True, description="oneDNN sgemm for the CPU's matrix products (train.cpu_kernels)")

    depends_on("c", type="build")
    depends_on("cxx", type="build")
    depends_on("cmake@3.20:", type="build")

    depends_on("mpi")
    depends_on("hdf5")
    depends_on("boost+program_options")
    depends_on("blas")
    depends_on("zlib-api")
    depends_on("nlohmann-json@3.2:")
    depends_on("catch2@2", type="test")

    depends_on("nccl", when="+nccl")
    for arch in CudaPackage.cuda_arch_values:
        depends_on(f"nccl cuda_arch={arch}", when=f"+nccl cuda_arch={arch}")
    # Opened at run time (dlopen); the build needs its headers and records its
    # library folder, so the installed mpiddp finds this cuDNN without a module.
    depends_on("cudnn", when="+cudnn")
    # OpenMP runtime: mpiddp sets oneDNN's threads per rank with omp_set_num_threads.
    depends_on("onednn cpu_runtime=omp", when="+onednn")
    conflicts("cuda_arch=none", when="+cuda", msg="name the GPU generation, e.g. cuda_arch=90")

    def cmake_args(self):
        spec = self.spec
        blas = spec["blas"]
        args = [
            self.define("MPIDDP_BUILD_TESTS", self.run_tests),
            self.define_from_variant("MPIDDP_ENABLE_CUDA", "cuda"),
            self.define_from_variant("MPIDDP_ENABLE_ONEDNN", "onednn"),
            # OpenBLAS gets per-rank thread control; any other BLAS is found generically.
            self.define("BLA_VENDOR", "OpenBLAS" if blas.name == "openblas" else "All"),
        ]
        cblas = [d for d in blas.headers.directories if os.path.exists(join_path(d, "cblas.h"))]
        if cblas:  # otherwise CMake searches the usual places
            args.append(self.define("CBLAS_INCLUDE_DIR", cblas[0]))
        if spec.satisfies("+cuda"):
            args.append(self.define_cuda_architectures(self))
            args.append(self.define_from_variant("MPIDDP_ENABLE_NCCL", "nccl"))
            args.append(self.define_from_variant("MPIDDP_ENABLE_CUDNN", "cudnn"))
        return args

    def check(self):
        # Build-time tests (spack install --test=root): the unit and MPI suites;
        # the integration and Slurm suites need data sets and daemons.
        with working_dir(self.build_directory):
            ctest("-L", "unit|mpi", "--output-on-failure")

    # The Python tools: the package python/mpiddp_tools in share/mpiddp/python, their entry points in
    # share/mpiddp/scripts (MPIDDP_SCRIPTS, beside CMake's sbatch template); each entry point imports the
    # package from ../python next to its own real path, as in the checkout. They run with the python3 on PATH
    # (h5py, torch and matplotlib from the system where a tool needs them), so no Python is a dependency.
    # scripts/gpu-check needs a checkout (its tests and inputs) and is not installed.
    tools = ("to-torch", "from-torch", "plot", "sweep", "sweep-summary", "trace-merge")

    @run_after("install")
    def install_tools(self):
        source = self.stage.source_path
        package = join_path(self.prefix.share.mpiddp.python, "mpiddp_tools")
        mkdirp(package)
        for name in sorted(os.listdir(join_path(source, "python", "mpiddp_tools"))):
            if name.endswith(".py"):
                install(join_path(source, "python", "mpiddp_tools", name), package)
        mkdirp(self.prefix.share.mpiddp.scripts)
        for tool in self.tools:
            install(join_path(source, "scripts", tool), self.prefix.share.mpiddp.scripts)

    def setup_run_environment(self, env):
        env.set("MPIDDP_SCRIPTS", self.prefix.share.mpiddp.scripts)

    sanity_check_is_file = [join_path("bin", "mpiddp"),
                            join_path("share", "mpiddp", "python", "mpiddp_tools", "__init__.py")]
    sanity_check_is_dir = [join_path("share", "mpiddp", "inputs")]

    # ---- smoke tests: spack test run mpiddp ----

    def test_help(self):
        """mpiddp --help lists the subcommands"""
        mpiddp = which(self.prefix.bin.mpiddp)
        out = mpiddp("--help", output=str.split, error=str.split)
        for command in ("train", "shard", "inspect"):
            assert command in out, f"'{command}' missing from mpiddp --help"

    def test_sampler(self):
        """inspect sampler prints PyTorch's DistributedSampler order"""
        mpiddp = which(self.prefix.bin.mpiddp)
        out = mpiddp("inspect", "sampler", "--size", "10", "--world", "3", "--rank", "1", "--seed", "42",
                     output=str.split, error=str.split)
        assert out.strip() == "6 4 9 2", out

    def test_train_two_ranks(self):
        """shard a generated CSV and train it on 2 MPI ranks"""
        mpiddp = which(self.prefix.bin.mpiddp)
        with open("blobs.csv", "w") as f:
            for i in range(600):
                label = i % 3
                features = [((i * 7919 + j * 104729) % 1000) / 1000.0 + (1.5 if j % 3 == label else 0.0)
                            for j in range(6)]
                f.write(",".join(f"{x:.4f}" for x in features) + f",{label}\n")
        mpiddp("shard", "--format", "csv", "--input", "blobs.csv", "--out", "shards", "--shards", "2")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
        mpirun = which(join_path(self.spec["mpi"].prefix.bin, "mpirun")) or which("mpirun")
        out = mpirun("-n", "2", self.prefix.bin.mpiddp, "train", "--data.train", "shards", "--data.test", "shards",
                     "--model.hidden", "16", "--train.epochs", "5", "--train.batch_size", "16",
                     "--optim.lr", "0.1", "--optim.momentum", "0.9", "--run.dir", "run",
                     output=str.split, error=str.split)
        assert "test accuracy" in out, out
        with open(join_path("run", "summary.json")) as f:
            assert '"world_size":2' in f.read()
