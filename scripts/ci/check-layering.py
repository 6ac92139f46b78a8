#!/usr/bin/env python3
"""Checks the module layering of mpiddp from the #include lines.

Each folder under src/ and include/mpiddp/ is a module. Modules form one order,
lowest first (docs/architecture.md); a file may include headers of its own
module and of modules below it, never above. Public headers (include/mpiddp/,
and each op family's interface src/ops/<family>/<family>_ops.hpp) must not pull
in third-party headers that only one module needs (HDF5, CUDA, NCCL), so that
including mpiddp headers stays cheap and backend-free.

It also checks the shape of the op families (src/ops/<family>/): each has its
interface <family>_ops.hpp, a CPU implementation cpu_<family>*.cpp and a GPU one
(cuda_*.cpp or cudnn_*.cpp) that each register with register_ops<...>, and a
family includes no other family (what two share lives below, in device or cuda).

usage: check-layering.py [SOURCE_DIR]; prints every violation, exits 1 if any.
"""
import pathlib
import re
import sys

ORDER = ["common", "config", "io", "dist", "device", "cuda", "ops", "nn", "optim", "ddp", "data", "checkpoint",
         "train", "cli"]
RANK = {name: i for i, name in enumerate(ORDER)}
# Third-party headers public headers must not include (they belong in .cpp files
# or in private headers under src/).
PRIVATE_THIRD_PARTY = re.compile(r"^(hdf5|H5\w*|cuda\w*|cublas\w*|nccl|cudnn\w*)\.h$")
INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)


def module_of(path, root):
    rel = path.relative_to(root)
    parts = rel.parts
    if parts[0] == "include":
        return parts[2] if len(parts) > 3 else None
    if parts[0] == "src":
        return parts[1] if len(parts) > 2 else None
    return None


def included_module(target):
    """The module a quoted include names: "mpiddp/<m>/x.hpp" or src-relative "<m>/x.hpp"."""
    parts = target.split("/")
    if parts[0] == "mpiddp" and len(parts) > 2:
        return parts[1]
    if len(parts) > 1 and parts[0] in RANK:
        return parts[0]
    return None  # same folder


def is_public(path, root):
    parts = path.relative_to(root).parts
    if parts[0] == "include":
        return True
    return len(parts) == 4 and parts[1] == "ops" and parts[3] == f"{parts[2]}_ops.hpp"


def family_of(target):
    """The op family a quoted include names ("ops/<family>/..."), or None."""
    parts = target.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "ops" else None


def check_families(root):
    problems = []
    for folder in sorted(p for p in (root / "src" / "ops").iterdir() if p.is_dir()):
        family, rel = folder.name, folder.relative_to(root)
        names = [p.name for p in folder.iterdir()]
        if f"{family}_ops.hpp" not in names:
            problems.append(f"{rel}: no interface {family}_ops.hpp")
        for kind, prefixes in (("CPU", ("cpu_",)), ("GPU", ("cuda_", "cudnn_"))):
            impls = [n for n in names if n.startswith(prefixes) and n.endswith(".cpp")]
            if not impls:
                problems.append(f"{rel}: no {kind} implementation ({' or '.join(p + '*.cpp' for p in prefixes)})")
            elif not any("register_ops<" in (folder / n).read_text() for n in impls):
                problems.append(f"{rel}: the {kind} implementation never calls register_ops<...>")
        for path in sorted(folder.iterdir()):
            if path.suffix not in (".hpp", ".cpp", ".cu", ".cuh"):
                continue
            for match in INCLUDE.finditer(path.read_text()):
                other = family_of(match.group(2))
                if other and other != family:
                    problems.append(f"{path.relative_to(root)}: family {family} includes family {other}'s "
                                    f"\"{match.group(2)}\" (share it from device/ or cuda/ instead)")
    return problems


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    files = [p for d in ("src", "include/mpiddp") for p in (root / d).rglob("*")
             if p.suffix in (".hpp", ".cpp", ".cu", ".cuh", ".inl", ".h")]
    problems = []
    for path in sorted(files):
        module = module_of(path, root)
        if module is None:
            continue
        if module not in RANK:
            problems.append(f"{path.relative_to(root)}: module '{module}' is not in the layer order {ORDER}")
            continue
        public = is_public(path, root)
        text = path.read_text()
        for match in INCLUDE.finditer(text):
            quote, target = match.groups()
            line = text.count("\n", 0, match.start()) + 1
            where = f"{path.relative_to(root)}:{line}"
            if quote == "<":
                if public and PRIVATE_THIRD_PARTY.match(target):
                    problems.append(f"{where}: public header includes <{target}> (keep it in a .cpp or src/ header)")
                continue
            other = included_module(target)
            if other is None or other == module:
                continue
            if other not in RANK:
                problems.append(f"{where}: includes \"{target}\" of unknown module '{other}'")
            elif RANK[other] > RANK[module]:
                problems.append(f"{where}: {module} includes \"{target}\", but {other} is above {module} "
                                f"(order: {' < '.join(ORDER)})")
    problems += check_families(root)
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
