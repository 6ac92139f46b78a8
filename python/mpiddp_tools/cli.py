"""The command line of a tool whose module docstring is its manual: first line, blank, usage line, then the
text that --help prints after the options."""
import argparse


def parser_from_doc(doc):
    return argparse.ArgumentParser(description=doc.splitlines()[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter,
                                   epilog="\n".join(doc.splitlines()[3:]))
