#!/usr/bin/env python3
"""CI check of package.py without Spack: the recipe compiles as Python, the
dependencies CMakeLists.txt looks for are exactly the ones the recipe declares,
its license has a LICENSE file, and no version pins a placeholder (all-zero) hash.

usage: scripts/ci/check-recipe.py [SOURCE_DIR]
"""
import ast
import os
import re
import sys

# CMake package (find_package / find_library name) -> Spack package or virtual.
CMAKE_TO_SPACK = {
    "MPI": "mpi",
    "HDF5": "hdf5",
    "Boost": "boost",
    "BLAS": "blas",
    "ZLIB": "zlib-api",
    "nlohmann_json": "nlohmann-json",
    "Catch2": "catch2",
    "CUDAToolkit": "cuda",
    "nccl": "nccl",
    "cudnn": "cudnn",
    "dnnl": "onednn",
}
PROVIDED_BY_THE_SYSTEM = {"Threads"}  # the C library, no Spack package
IMPLIED_BY_SPACK = {"c", "cxx", "cmake", "cuda"}  # compilers, build tool, CudaPackage's own cuda


def cmake_dependencies(source):
    found = set()
    for root, _, files in os.walk(source):
        if any(part.startswith(("build", ".")) for part in os.path.relpath(root, source).split(os.sep) if part != "."):
            continue
        for name in files:
            if name == "CMakeLists.txt" or name.endswith(".cmake"):
                text = open(os.path.join(root, name)).read()
                found |= set(re.findall(r"find_package\(\s*([A-Za-z0-9_]+)", text))
                found |= {m.lower() for m in re.findall(r"find_library\([A-Za-z0-9_]+\s+(?:NAMES\s+)?(nccl|cudnn|dnnl)\b", text, re.I)}
    return found - PROVIDED_BY_THE_SYSTEM


def recipe_dependencies(path):
    tree = ast.parse(open(path).read(), path)
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "depends_on" and node.args:
            arg = node.args[0]
            text = arg.value if isinstance(arg, ast.Constant) else (
                arg.values[0].value if isinstance(arg, ast.JoinedStr) and isinstance(arg.values[0], ast.Constant) else "")
            match = re.match(r"[A-Za-z0-9_-]+", text.strip())
            if match:
                names.add(match.group(0))
    return names


def recipe_problems_beyond_dependencies(source, recipe_text):
    """A declared license needs its file, and a version must not pin a made-up commit."""
    problems = []
    if re.search(r"^\s*license\(", recipe_text, re.M) and not os.path.exists(os.path.join(source, "LICENSE")):
        problems.append("package.py declares a license but the source tree has no LICENSE file")
    for placeholder in re.findall(r"(?:commit|sha256)=\"(0+)\"", recipe_text):
        problems.append(f"package.py pins a placeholder hash ({len(placeholder)} zeros)")
    return problems


def main():
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    recipe = os.path.join(source, "package.py")
    recipe_text = open(recipe).read()
    compile(recipe_text, recipe, "exec")  # a syntax error raises here
    cmake = cmake_dependencies(source)
    unknown = sorted(n for n in cmake if n not in CMAKE_TO_SPACK)
    from_cmake = {CMAKE_TO_SPACK[n] for n in cmake if n in CMAKE_TO_SPACK}
    declared = recipe_dependencies(recipe)
    missing = sorted(from_cmake - declared - {"cuda"})
    extra = sorted(declared - from_cmake - IMPLIED_BY_SPACK)
    print(f"CMake looks for: {', '.join(sorted(cmake))}")
    print(f"package.py depends on: {', '.join(sorted(declared))}")
    problems = recipe_problems_beyond_dependencies(source, recipe_text)
    if unknown:
        problems.append(f"CMake packages without a Spack mapping in this script: {', '.join(unknown)}")
    if missing:
        problems.append(f"found by CMake but not declared in package.py: {', '.join(missing)}")
    if extra:
        problems.append(f"declared in package.py but not looked for by CMake: {', '.join(extra)}")
    for p in problems:
        print("FAIL: " + p)
    print("recipe check: " + ("FAIL" if problems else "PASS"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
