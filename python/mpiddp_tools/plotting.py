"""matplotlib for the tools that draw (scripts/plot, scripts/sweep-summary --plot): no display needed, and one
error line where it is missing."""
import os

from .errors import die, missing_module

IMAGE_TYPES = (".png", ".svg")


def check_image_name(option, path):
    """An image is written as .png or .svg, chosen by the name's extension."""
    if os.path.splitext(path)[1].lower() not in IMAGE_TYPES:
        die(f"{option} {path}: give a .png or .svg file name")


def import_pyplot(prefix=""):
    """matplotlib's pyplot without a display (Agg), or one clear line and exit 2; PREFIX: what needs it
    (e.g. "--plot ")."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as pyplot
    except ImportError:
        missing_module("matplotlib", prefix)
    return pyplot
