#!/usr/bin/env python3
"""Checks the module layering of mpiddp from the #include lines.

Each folder under src/ and include/mpiddp/ is a module. Modules form one order,
lowest first (docs/architecture.md); a file may include headers of its own
module and of modules below it, never above. Public headers (include/mpiddp/)
must not pull in third-party headers that only one module needs (HDF5, CUDA,
NCCL), so that including mpiddp headers stays cheap and backend-free.

usage: check-layering.py [SOURCE_DIR]; prints every violation, exits 1 if any.
"""
import pathlib
import re
import sys

ORDER = ["common", "config", "io", "dist", "device", "nn", "optim", "ddp", "cuda", "data", "checkpoint", "train",
         "cli"]
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


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).resolve().parents[2])
    files = [p for d in ("src", "include/mpiddp") for p in (root / d).rglob("*")
             if p.suffix in (".hpp", ".cpp", ".cu", ".inl", ".h")]
    problems = []
    for path in sorted(files):
        module = module_of(path, root)
        if module is None:
            continue
        if module not in RANK:
            problems.append(f"{path.relative_to(root)}: module '{module}' is not in the layer order {ORDER}")
            continue
        public = path.relative_to(root).parts[0] == "include"
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
    for p in problems:
        print(p)
    print(f"layering: {len(files)} files, {len(problems)} violation(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
