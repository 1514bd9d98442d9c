"""The workspace guard: which paths the file tools may touch, and safe I/O there.

``paths`` holds ``PathGuard``; ``resolve`` follows links the way the kernel would;
``dirfd`` does race-safe I/O through directory descriptors; ``hardlinks`` finds second
names of forbidden files; ``provenance`` remembers which files came from outside.
"""
