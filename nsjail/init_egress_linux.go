package nsjail

import (
	"fmt"
	"slices"

	"golang.org/x/sys/unix"
)

var dnsStubAddr = [4]byte{127, 0, 0, 53}

// handOverEgress opens the DNS stub's UDP socket and TCP listener on
// DNSStubIP:53 and a TCP listener on every forward's reserved address and
// port, in the sandbox's network namespace, and passes them to the
// supervisor over the proxy's unix socket, ahead of the proxy's listener.
// Nothing inside the sandbox serves them: the supervisor does, from the
// host side. A port not forwarded has no listener, so a connection to it
// is refused by the sandbox's own kernel.
func (in *initProc) handOverEgress() error {
	if !in.spec.DNS {
		return nil
	}
	var fds []int
	defer func() { closeAll(fds) }()
	fd, err := bindInet(unix.SOCK_DGRAM, dnsStubAddr, 53)
	if err != nil {
		return err
	}
	fds = append(fds, fd)
	if fd, err = bindInet(unix.SOCK_STREAM, dnsStubAddr, 53); err != nil {
		return err
	}
	fds = append(fds, fd)
	for _, fw := range in.spec.Forwards {
		if fd, err = bindInet(unix.SOCK_STREAM, fw.IP, int(fw.Port)); err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	if len(in.spec.Forwards) > 0 {
		if fd, err = openSYNWatch(); err != nil {
			return err
		}
		fds = append(fds, fd)
	}
	for len(fds) > 0 {
		n := min(len(fds), maxFDsPerMsg)
		if err := unix.Sendmsg(proxyFD, []byte{'E'}, unix.UnixRights(fds[:n]...), nil, 0); err != nil {
			return fmt.Errorf("sendmsg SCM_RIGHTS (%d sockets): %w", n, err)
		}
		closeAll(fds[:n])
		fds = fds[n:]
	}
	return nil
}

// synWatchRcvBuf is the SYN watch's receive buffer: what may wait while
// the supervisor is over its refusal rate; past it the kernel drops the
// flood (socket(7), SO_RCVBUF; the kernel doubles it).
const synWatchRcvBuf = 8 << 10

// synWatchFilter accepts IPv4 TCP segments with SYN set and ACK clear, not
// fragments, to 127.1.0.0/16 (the forwards' reserved addresses), as
// received (PACKET_HOST: lo shows each frame also as PACKET_OUTGOING, and
// one copy is wanted), cut to 128 bytes: enough for the largest IP header
// (60) and the TCP ports. Offsets are from the IP header (SOCK_DGRAM with
// ETH_P_IP, packet(7)).
//
// Raw classic BPF (filter(2) opcodes), not golang.org/x/net/bpf's
// assembler: the init binary imports only the standard library and
// golang.org/x/sys (issue 13). TestSYNWatchFilterAssembles holds it equal
// to the same program written with x/net/bpf's instructions.
var synWatchFilter = []unix.SockFilter{
	/* 0 */ {Code: unix.BPF_LD | unix.BPF_W | unix.BPF_ABS, K: skfAdOff + skfAdPktType}, // A = the packet type
	/* 1 */ {Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 11, K: unix.PACKET_HOST},
	/* 2 */ {Code: unix.BPF_LD | unix.BPF_B | unix.BPF_ABS, K: 9}, // protocol
	/* 3 */ {Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 9, K: unix.IPPROTO_TCP},
	/* 4 */ {Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 6}, // flags and fragment offset
	/* 5 */ {Code: unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K, Jt: 7, K: 0x1fff}, // a fragment's offset
	/* 6 */ {Code: unix.BPF_LD | unix.BPF_H | unix.BPF_ABS, K: 16}, // destination's first half
	/* 7 */ {Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 5, K: 0x7f01}, // 127.1.x.x
	/* 8 */ {Code: unix.BPF_LDX | unix.BPF_B | unix.BPF_MSH, K: 0}, // X = the IP header's length
	/* 9 */ {Code: unix.BPF_LD | unix.BPF_B | unix.BPF_IND, K: 13}, // TCP flags
	/* 10 */ {Code: unix.BPF_ALU | unix.BPF_AND | unix.BPF_K, K: 0x12}, // SYN|ACK
	/* 11 */ {Code: unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K, Jf: 1, K: 0x02},
	/* 12 */ {Code: unix.BPF_RET | unix.BPF_K, K: 128},
	/* 13 */ {Code: unix.BPF_RET | unix.BPF_K, K: 0}, // every rejecting jump lands here
}

// The ancillary load of the packet type (SKF_AD_OFF + SKF_AD_PKTTYPE,
// include/uapi/linux/filter.h; x/sys/unix has neither).
const (
	skfAdOff     = 0xfffff000 // -0x1000 as a uint32
	skfAdPktType = 4
)

// loopbackIfindex is lo's index in every network namespace
// (LOOPBACK_IFINDEX, include/net/flow.h, since Linux 3.x).
const loopbackIfindex = 1

// openSYNWatch opens an AF_PACKET socket on lo that sees the SYNs sent to
// the reserved addresses, so that the supervisor can record a connection
// to a port that has no listener, which the sandbox's kernel refuses with
// an RST without telling anyone (issue 18: "refused and recorded"). It
// needs CAP_NET_RAW in the network namespace's user namespace, which the
// init holds until its capabilities are dropped.
func openSYNWatch() (int, error) {
	// Protocol 0: the socket receives nothing until the bind below names
	// ETH_P_IP (packet(7)), and the bind then registers its hook once,
	// where a socket made with ETH_P_IP would unregister it first and wait
	// for an RCU grace period (synchronize_net, net/packet/af_packet.c).
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket(AF_PACKET, SOCK_DGRAM, 0): %w", err)
	}
	fail := func(what string, err error) (int, error) {
		unix.Close(fd)
		return -1, fmt.Errorf("%s: %w", what, err)
	}
	// The filter before the bind, so that nothing unfiltered queues.
	filter := slices.Clone(synWatchFilter) // the kernel copies it; the table stays read-only
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER, &fprog); err != nil {
		return fail("setsockopt SO_ATTACH_FILTER (SYN watch)", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF, synWatchRcvBuf); err != nil {
		return fail(fmt.Sprintf("setsockopt SO_RCVBUF %d (SYN watch)", synWatchRcvBuf), err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: htons(unix.ETH_P_IP), Ifindex: loopbackIfindex}); err != nil {
		return fail(fmt.Sprintf("bind AF_PACKET lo (ifindex %d)", loopbackIfindex), err)
	}
	return fd, nil
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// bindInet makes a socket of type typ bound to addr:port, listening when
// it is a stream socket.
func bindInet(typ int, addr [4]byte, port int) (int, error) {
	what := fmt.Sprintf("%d.%d.%d.%d:%d", addr[0], addr[1], addr[2], addr[3], port)
	kind := "SOCK_STREAM"
	if typ == unix.SOCK_DGRAM {
		kind = "SOCK_DGRAM"
	}
	fd, err := unix.Socket(unix.AF_INET, typ|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("socket(AF_INET, %s): %w", kind, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: port, Addr: addr}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("bind %s %s: %w", kind, what, err)
	}
	if typ == unix.SOCK_STREAM {
		if err := unix.Listen(fd, 128); err != nil {
			unix.Close(fd)
			return -1, fmt.Errorf("listen %s: %w", what, err)
		}
	}
	return fd, nil
}
