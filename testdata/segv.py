# Dereference NULL: the process dies by a real SIGSEGV, not by kill(2).
import ctypes
ctypes.string_at(0)
