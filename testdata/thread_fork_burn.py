# thread_fork_burn.py: a thread, not the main one, forks three processes
# that burn CPU forever; the main thread sleeps. The kernel lists each
# child under the thread that forked it (/proc/PID/task/TID/children).
import os, threading, time

def fork_burners():
    for _ in range(3):
        if os.fork() == 0:
            while True:
                pass
    # The thread stays: when it ends, its children move to another
    # thread of the process (the leader, most often).
    time.sleep(3600)

threading.Thread(target=fork_burners).start()
time.sleep(3600)
