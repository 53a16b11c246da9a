//go:build sbx_lean

package main

import "github.com/urfave/cli/v2"

// imageCommand is `sbx image` of the lean sbx: the same name, usage and
// description as the full sbx's (image_help.go), so that `sbx --help`
// reads the same, and every subcommand, its flags and its help are the
// full sbx's, which main hands the command to (handOff; the lean sbx
// links no image support: engine/image_lean.go).
func imageCommand() *cli.Command {
	return &cli.Command{
		Name:            imageName,
		Usage:           imageUsage,
		Description:     imageDescription,
		HideHelpCommand: true,
		// The full sbx parses the subcommands and flags.
		SkipFlagParsing: true,
		Action:          func(*cli.Context) error { return handOffNow(imageName) },
	}
}
