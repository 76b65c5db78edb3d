"""python3 -m asm.gen: see cli.py."""

from .cli import main

main()
