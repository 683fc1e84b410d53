package testpod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"antrea.io/antrea/pkg/version"
)

// defaultPorts are served over TCP and UDP when serve is given no port at all,
// the ports of the upstream NetworkPolicy test matrix.
var defaultPorts = []int{80, 81}

// Main runs the antrea-testpod command line and returns the process exit
// status: for connect, the verdict's ExitCode; ExitCodeError on bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	exit := 0
	root := &cobra.Command{
		Use:           "antrea-testpod",
		Short:         "Test pod program: serve TCP/UDP answering with a name, or probe an address",
		Version:       version.String("antrea-testpod"),
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(serveCommand(ctx), dnsCommand(ctx), connectCommand(ctx, stdout, &exit), httpCommand(ctx, stdout), holdCommand(ctx, stdout), floodCommand(ctx, stdout),
		mcastSendCommand(ctx, stdout), mcastRecvCommand(ctx, stdout))
	if err := root.Execute(); err != nil {
		fmt.Fprintln(stderr, "antrea-testpod:", err)
		return ExitCodeError
	}
	return exit
}

func serveCommand(ctx context.Context) *cobra.Command {
	var cfg ServeConfig
	cmd := &cobra.Command{
		Use:   "serve --name NAME [--tcp PORTS] [--udp PORTS] [--http PORTS]",
		Short: "Answer every TCP connection and UDP datagram with NAME (TCP and UDP 80,81 when no port is given)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.Name == "" {
				cfg.Name = os.Getenv("POD_NAME")
			}
			if cfg.Name == "" {
				h, err := os.Hostname()
				if err != nil {
					return fmt.Errorf("serve: no --name and no hostname: %w", err)
				}
				cfg.Name = h
			}
			if !cmd.Flags().Changed("tcp") && !cmd.Flags().Changed("udp") && !cmd.Flags().Changed("http") && !cmd.Flags().Changed("https") {
				cfg.TCPPorts, cfg.UDPPorts = defaultPorts, defaultPorts
			}
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return Serve(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.Name, "name", "", "name to answer with (default $POD_NAME, else the hostname)")
	cmd.Flags().IntSliceVar(&cfg.TCPPorts, "tcp", nil, "TCP ports to serve, comma-separated")
	cmd.Flags().IntSliceVar(&cfg.UDPPorts, "udp", nil, "UDP ports to serve, comma-separated")
	cmd.Flags().IntSliceVar(&cfg.HTTPPorts, "http", nil, "TCP ports to serve HTTP on: GET /clientip answers the client's IP:port, /hostname the name (as agnhost netexec), any other request \"NAME METHOD PATH\"")
	cmd.Flags().IntSliceVar(&cfg.HTTPSPorts, "https", nil, "TCP ports to serve HTTPS on (as --http, self-signed certificate)")
	cmd.Flags().StringVar(&cfg.Host, "host", "", "address to bind (default every address)")
	return cmd
}

func dnsCommand(ctx context.Context) *cobra.Command {
	cfg := DNSConfig{Addr: ":53"}
	cmd := &cobra.Command{
		Use:   "dns --zone ZONE --file FILE [--addr :53]",
		Short: "Serve the A and AAAA records of ZONE from FILE (\"NAME TTL A|AAAA ADDRESS\" lines, read on every query) over UDP and TCP",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return ServeDNS(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.Zone, "zone", "", "the zone served, e.g. lab.test")
	cmd.Flags().StringVar(&cfg.File, "file", "", "the zone file")
	cmd.Flags().StringVar(&cfg.Addr, "addr", cfg.Addr, "UDP and TCP address to listen on")
	return cmd
}

func holdCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	var cfg HoldConfig
	cmd := &cobra.Command{
		Use: "hold (--listen ADDR | --to HOST:PORT --connections N [--rate 500])",
		Short: "Hold idle TCP connections until killed: accept and keep every one (--listen), or open N to HOST:PORT " +
			"(at most --rate a second), print \"holding N\" and keep them",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg.Opened = func(n int) { fmt.Fprintf(stdout, "holding %d\n", n) }
			ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return Hold(ctx, cfg)
		},
	}
	cmd.Flags().StringVar(&cfg.Listen, "listen", "", "address to accept connections on, e.g. :7000")
	cmd.Flags().StringVar(&cfg.To, "to", "", "HOST:PORT to open connections to")
	cmd.Flags().IntVar(&cfg.Count, "connections", 0, "how many connections to open and hold")
	cmd.Flags().IntVar(&cfg.Rate, "rate", 500, "connections opened a second at most")
	return cmd
}

func floodCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	cfg := FloodConfig{Rate: 100, For: 10 * time.Second, Timeout: time.Second}
	cmd := &cobra.Command{
		Use:   "flood --to HOST:PORT [--rate 100] [--for 10s] [--timeout 1s]",
		Short: "Attempt TCP connections to HOST:PORT, --rate a second for --for, each from a new source port; print the counts",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.To == "" {
				return errors.New("flood: --to HOST:PORT is required")
			}
			res, err := Flood(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "attempts=%d connected=%d failed=%d\n", res.Attempts, res.Connected, res.Failed)
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.To, "to", "", "HOST:PORT to attempt connections to")
	cmd.Flags().IntVar(&cfg.Rate, "rate", cfg.Rate, "attempts a second")
	cmd.Flags().DurationVar(&cfg.For, "for", cfg.For, "how long to attempt")
	cmd.Flags().DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long an attempt waits")
	return cmd
}

func connectCommand(ctx context.Context, stdout io.Writer, exit *int) *cobra.Command {
	cfg := ConnectConfig{Protocol: "tcp", Timeout: time.Second}
	var every, duration time.Duration
	cmd := &cobra.Command{
		Use: "connect --to HOST:PORT [--protocol tcp|udp] [--timeout 1s] [--every 10ms --for 60s]",
		Short: "Probe HOST:PORT; print connected/refused/timeout (+ the answering name); exit 0/1/2 (3: could not probe). " +
			"With --every and --for: probe repeatedly, print the counts and the longest gap between connected probes, exit 0",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cfg.To == "" {
				return errors.New("connect: --to HOST:PORT is required")
			}
			if cmd.Flags().Changed("every") || cmd.Flags().Changed("for") {
				sum, err := ConnectLoop(ctx, LoopConfig{ConnectConfig: cfg, Every: every, For: duration})
				if err != nil {
					return err
				}
				fmt.Fprintln(stdout, sum.String())
				*exit = 0
				return nil
			}
			res, err := Connect(ctx, cfg)
			if err != nil {
				return err
			}
			fmt.Fprintln(stdout, res.String())
			*exit = res.Verdict.ExitCode()
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.Protocol, "protocol", cfg.Protocol, "tcp or udp")
	cmd.Flags().StringVar(&cfg.To, "to", "", "HOST:PORT to probe")
	cmd.Flags().DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "how long to wait for an answer")
	cmd.Flags().DurationVar(&every, "every", 0, "probe repeatedly, one probe every this long (with --for)")
	cmd.Flags().DurationVar(&duration, "for", 0, "how long to probe repeatedly (with --every)")
	return cmd
}

func httpCommand(ctx context.Context, stdout io.Writer) *cobra.Command {
	var cfg HTTPConfig
	cmd := &cobra.Command{
		Use: "http --to HOST:PORT [--host H] [--tls [--sni NAME]] [--repeat N] \"METHOD /path [HOST]\"...",
		Short: "Send HTTP(S) requests on kept-alive connections; print \"<request>: <status> <first body line>\", \"reset\" or \"error\" for each " +
			"(with --repeat: the count, rate and p50/p99 latency)",
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Requests = args
			start := time.Now()
			results, err := HTTP(ctx, cfg)
			if err != nil {
				return err
			}
			if cfg.Repeat > 1 {
				fmt.Fprintln(stdout, HTTPSummary(results, time.Since(start)))
				return nil
			}
			for _, r := range results {
				fmt.Fprintln(stdout, r.String())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&cfg.To, "to", "", "HOST:PORT to connect to")
	cmd.Flags().StringVar(&cfg.Host, "host", "", "Host header (default the host of --to)")
	cmd.Flags().BoolVar(&cfg.TLS, "tls", false, "HTTPS (the certificate is not verified)")
	cmd.Flags().StringVar(&cfg.SNI, "sni", "", "TLS server name (default --host unless it is an IP address)")
	cmd.Flags().IntVar(&cfg.Repeat, "repeat", 1, "send the requests this many times and print a summary")
	cmd.Flags().DurationVar(&cfg.Timeout, "timeout", 3*time.Second, "timeout of each request")
	return cmd
}
