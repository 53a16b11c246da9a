//go:build sbx_lean

package main

import "github.com/urfave/cli/v2"

// The lean sbx (-tags sbx_lean, `make sbx`'s installed binary) leaves
// serve_cmd.go and ops_cmd.go out, and with them package serve and
// prometheus's client_golang (internal/fullbin says why), and
// image_cmd.go with package image and go-containerregistry
// (image_lean.go). The commands they define are registered here and in
// image_lean.go under the same name, usage and description, so that `sbx
// --help` reads the same, and are run by the full sbx: main hands them
// off before the CLI parses anything (handOff), and these actions do it
// from wherever the CLI reached them otherwise.

// handedOff are the commands only the full sbx has. (A run on an image,
// which only the full sbx can do, is known only once its profile is
// loaded: execAction, replAction and doctor hand it off then.)
var handedOff = []string{serveName, imageName}

// build says which of the two sbx this is, for `sbx doctor`.
const build = buildLean

func serveCommand() *cli.Command {
	return &cli.Command{
		Name:            serveName,
		Usage:           serveUsage,
		Description:     serveDescription,
		HideHelpCommand: true,
		// The full sbx parses the flags: any it is given go to it.
		SkipFlagParsing: true,
		Action:          func(*cli.Context) error { return handOffNow(serveName) },
	}
}

// withOpsFlags: the full sbx adds them (ops_cmd.go).
func withOpsFlags(cmd *cli.Command) *cli.Command { return cmd }
