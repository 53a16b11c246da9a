//go:build !sbx_lean

package main

// `sbx image`, in the full sbx only: the lean sbx hands it off
// (image_lean.go), as it does `sbx serve`.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/sbx-sandbox/sbx/engine"
	"github.com/sbx-sandbox/sbx/image"
	"github.com/sbx-sandbox/sbx/nsjail"
)

func imageCommand() *cli.Command {
	noArgs := func(c *cli.Context, n int, what string) error {
		if c.NArg() != n {
			return usageError(c, fmt.Errorf("want %s, got %d arguments", what, c.NArg()), false)
		}
		return nil
	}
	// withStore checks the argument count, then opens the store: each
	// subcommand but rm starts so, and its error is the command's exit.
	withStore := func(c *cli.Context, n int, what string) (*image.Store, error) {
		if err := noArgs(c, n, what); err != nil {
			return nil, err
		}
		return openStoreOrExit()
	}
	return &cli.Command{
		Name:         imageName,
		Usage:        imageUsage,
		Description:  imageDescription,
		OnUsageError: usageError,
		Subcommands: []*cli.Command{
			{
				Name: "pull", Usage: "fetch an image from its registry (docker config credentials)", ArgsUsage: "REF",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					s, err := withStore(c, 1, "one REF such as python:3.11-slim")
					if err != nil {
						return err
					}
					m, err := pull(s, c.Args().First(), false)
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					fmt.Printf("%s %s\n", m.Names[0], m.Digest)
					return nil
				},
			},
			{
				Name: "import", Usage: "add an image from a docker save tarball, an OCI archive or an OCI layout directory", ArgsUsage: "FILE",
				Flags:        []cli.Flag{&cli.StringFlag{Name: "name", Usage: "store it as `NAME` (default: the archive's own tag, else the file's name)"}},
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					s, err := withStore(c, 1, "one FILE")
					if err != nil {
						return err
					}
					m, err := s.Import(c.Args().First(), c.String("name"))
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					engine.ProbePython(s, m)
					fmt.Printf("%s %s\n", m.Names[0], m.Digest)
					return nil
				},
			},
			{
				Name: "ls", Usage: "list the images in the store",
				Flags:        []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "print a JSON array"}},
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					s, err := withStore(c, 0, "no arguments")
					if err != nil {
						return err
					}
					list, err := s.List()
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					if c.Bool("json") {
						if list == nil {
							list = []*image.Meta{}
						}
						return printIndented(list)
					}
					tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "NAME\tID\tSIZE\tUNPACKED")
					for _, m := range list {
						names := m.Names
						if len(names) == 0 {
							names = []string{"<none>"}
						}
						for _, n := range names {
							fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", familiar(n), shortID(m.ID), humanBytes(m.Stats.Bytes), m.Unpacked.Format(time.RFC3339))
						}
					}
					return tw.Flush()
				},
			},
			{
				Name: "inspect", Usage: "print what the store knows of an image, as JSON", ArgsUsage: "NAME",
				Description: "working_dir and user are shown as the image records them; a run uses neither:\n" +
					"its working directory is the workspace (the one writable place, where inputs go\n" +
					"and outputs are taken from) and it runs as the sandbox's uid.",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					s, err := withStore(c, 1, "one NAME")
					if err != nil {
						return err
					}
					m, err := s.Inspect(c.Args().First())
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return printIndented(m)
				},
			},
			{
				Name: "rm", Usage: "remove an image's name (and its tree, once no name and no run has it)", ArgsUsage: "NAME...",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					if c.NArg() == 0 {
						return usageError(c, errors.New("want one NAME or more"), false)
					}
					s, err := openStoreOrExit()
					if err != nil {
						return err
					}
					var errs []error
					for _, n := range c.Args().Slice() {
						id, gone, err := s.Remove(n)
						switch {
						case err != nil:
							errs = append(errs, err)
						case gone:
							fmt.Printf("removed %s (%s)\n", n, shortID(id))
						default:
							fmt.Printf("untagged %s (%s: another name or a running sandbox still has it)\n", n, shortID(id))
						}
					}
					if err := errors.Join(errs...); err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return nil
				},
			},
			{
				Name: "prune", Usage: "remove the images no name refers to, and leftovers of interrupted pulls",
				OnUsageError: usageError,
				Action: func(c *cli.Context) error {
					s, err := withStore(c, 0, "no arguments")
					if err != nil {
						return err
					}
					removed, err := s.Prune()
					for _, r := range removed {
						fmt.Println("removed " + r)
					}
					if err != nil {
						return cli.Exit(err.Error(), nsjail.ExitSbxFailed)
					}
					return nil
				},
			},
		},
	}
}

// openStoreOrExit opens the store for a command's Action: a store that
// will not open ends the command with ExitSbxFailed.
func openStoreOrExit() (*image.Store, error) {
	s, err := engine.OpenStore()
	if err != nil {
		return nil, cli.Exit(err.Error(), nsjail.ExitSbxFailed)
	}
	return s, nil
}

func printIndented(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = os.Stdout.Write(append(b, '\n'))
	return err
}

// familiar is a stored name as docker prints it: python:3.11, not
// index.docker.io/library/python:3.11 (lookups accept either).
func familiar(n string) string {
	if r, ok := strings.CutPrefix(n, "index.docker.io/library/"); ok {
		return r
	}
	if r, ok := strings.CutPrefix(n, "index.docker.io/"); ok {
		return r
	}
	return n
}

func shortID(id string) string {
	h := strings.TrimPrefix(id, "sha256:")
	if len(h) > 12 {
		h = h[:12]
	}
	return h
}

// pull fetches ref, with a progress bar when stderr is a terminal and
// quiet is not set. SIGINT cancels it; what was half-unpacked stays in
// the store's tmp/, invisible, until the next pull or prune.
func pull(s *image.Store, ref string, quiet bool) (*image.Meta, error) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	bar := newProgressBar(ref, quiet)
	defer bar.done()
	return engine.Pull(ctx, s, ref, bar.progress())
}
