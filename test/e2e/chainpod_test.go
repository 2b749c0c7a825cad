package e2e

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"
)

// chainPodCommand is the first argument that makes the test binary a pod
// process of the observed chain (TestMain).
const chainPodCommand = "chain-pod"

// runChainPod is one pod's process: it serves TCP on --listen (reading
// what a caller sends, then closing) and opens --rate connections per
// second to each address of --calls from the listen address's IP, so
// that the node's eBPF flow collector sees this pod's IP call its
// callees' IPs. It stops on SIGTERM or SIGINT, or after --for (so that a
// process whose test binary died does not run on). It returns the exit
// status.
func runChainPod(args []string) int {
	fs := flag.NewFlagSet(chainPodCommand, flag.ContinueOnError)
	listen := fs.String("listen", "", "IP:PORT to serve on; its IP is the source of the calls")
	calls := fs.String("calls", "", "comma-separated IP:PORT of the callees")
	rate := fs.Int("rate", 20, "connections per second to each callee, 1..1000")
	lifetime := fs.Duration("for", 5*time.Minute, "stop after this long")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *rate < 1 || *rate > 1000 || *lifetime <= 0 {
		fmt.Fprintf(os.Stderr, "chain-pod: --rate %d outside 1..1000 or --for %v not positive\n", *rate, *lifetime)
		return 2
	}
	host, _, err := net.SplitHostPort(*listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chain-pod: --listen %q: %v\n", *listen, err)
		return 2
	}
	src := net.ParseIP(host)
	var callees []string
	for c := range strings.SplitSeq(*calls, ",") {
		if c != "" {
			callees = append(callees, c)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *lifetime)
	defer cancel()

	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		fmt.Fprintf(os.Stderr, "chain-pod: %v\n", err)
		return 1
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		<-ctx.Done()
		ln.Close()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return // closed
			}
			wg.Go(func() {
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.Copy(io.Discard, io.LimitReader(c, 1<<10))
			})
		}
	})
	fmt.Fprintf(os.Stderr, "chain-pod: serving %s, calling %v %d times a second\n", *listen, callees, *rate)
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: time.Second}
	tick := time.NewTicker(time.Second / time.Duration(*rate))
	defer tick.Stop()
	var made, failed int
	for {
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "chain-pod: stopping (%v): %d calls made, %d failed\n", context.Cause(ctx), made, failed)
			return 0
		case <-tick.C:
		}
		for _, to := range callees {
			c, err := d.DialContext(ctx, "tcp", to)
			if err != nil {
				if !errors.Is(err, context.Canceled) && failed%100 == 0 {
					fmt.Fprintf(os.Stderr, "chain-pod: call %s: %v\n", to, err)
				}
				failed++
				continue
			}
			_, _ = c.Write([]byte("call\n"))
			c.Close()
			made++
		}
	}
}
