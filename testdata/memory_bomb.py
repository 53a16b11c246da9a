# memory_bomb.py: allocate 1 GiB, 16 MiB at a time, touching every page.
import sys
chunks = []
for i in range(64):
    chunks.append(bytearray(16 << 20))
    print(f"allocated {(i + 1) * 16} MiB", flush=True)
print("survived")
