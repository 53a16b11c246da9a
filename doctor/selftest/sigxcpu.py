# A forged CPU-limit kill: the payload sends itself SIGXCPU, which the
# kernel also sends at RLIMIT_CPU. No limit was reached.
import os, signal

os.kill(os.getpid(), signal.SIGXCPU)
