# flood.py MB: print MB megabytes to stdout: a head line, numbered middle
# lines, a tail line.
import sys
mb = int(sys.argv[1])
out = sys.stdout
out.write("HEAD-MARKER\n")
line = "x" * 99 + "\n"
for i in range(mb * 10485):
    out.write(line)
out.write("TAIL-MARKER\n")
