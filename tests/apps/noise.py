"""Tk fixture: a window full of random pixels, which no image codec can shrink much.

/usr/bin/python3 tests/apps/noise.py [--size WxH]
"""

from __future__ import annotations

import argparse
import os
import tkinter


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="800x600")
    width, height = (int(v) for v in parser.parse_args().size.split("x"))
    root = tkinter.Tk()
    root.title("Noise")
    ppm = b"P6 %d %d 255\n" % (width, height) + os.urandom(width * height * 3)
    image = tkinter.PhotoImage(data=ppm, format="ppm")
    tkinter.Label(root, image=image, borderwidth=0).pack()
    root.mainloop()


if __name__ == "__main__":
    main()
