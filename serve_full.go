//go:build !sbx_lean

package main

// The full sbx has every command: it hands nothing off (serve_lean.go is
// the lean sbx's side).
var handedOff []string

const build = buildFull
