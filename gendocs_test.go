//go:build !urfave_cli_no_docs

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestGenDocs: the man page names every flag of exec, and the bash
// completion, run in bash, completes commands, flags and profile names
// (issue 19, point 18).
func TestGenDocs(t *testing.T) {
	dir := t.TempDir()
	if err := writeDocs(newApp([]string{"sbx"}), dir); err != nil {
		t.Fatal(err)
	}
	man, _ := os.ReadFile(filepath.Join(dir, "sbx.1"))
	for _, f := range execCommand(nil, deps{}).Flags {
		if name := f.Names()[0]; !strings.Contains(string(man), `\fB`+dashed(name)+`\fP`) && !strings.Contains(string(man), `\fB`+dashed(name)+`,`) {
			t.Errorf("sbx.1 lacks %s", dashed(name))
		}
	}
	if strings.Contains(string(man), "gen-docs") {
		t.Errorf("sbx.1 lists the hidden gen-docs")
	}
	fish, _ := os.ReadFile(filepath.Join(dir, "sbx.fish"))
	if !strings.Contains(string(fish), "complete -c sbx") || !strings.Contains(string(fish), "ro-bind") {
		t.Errorf("sbx.fish: %.300s", fish)
	}
	if zsh, _ := os.ReadFile(filepath.Join(dir, "_sbx")); !strings.HasPrefix(string(zsh), "#compdef sbx") || !strings.Contains(string(zsh), "--overwrite-output") {
		t.Errorf("_sbx: %.300s", zsh)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("no bash to run the bash completion")
	}
	for _, tc := range []struct {
		words []string
		want  string
	}{
		{[]string{"sbx", ""}, "doctor exec image profile repl serve version"},
		{[]string{"sbx", "pro"}, "profile"},
		{[]string{"sbx", "profile", "s"}, "show"},
		{[]string{"sbx", "exec", "--ov"}, "--overwrite-output"},
		{[]string{"sbx", "exec", "--json", "--ro"}, "--ro-bind --rootfs"},
		{[]string{"sbx", "exec", "--profile", "st"}, "standard strict"},
		{[]string{"sbx", "doctor", "--"}, "--help --image --json --self-test"},
	} {
		script := ". " + filepath.Join(dir, "sbx.bash") + "; COMP_WORDS=(" + quoteWords(tc.words) + "); COMP_CWORD=" +
			fmt.Sprint(len(tc.words)-1) + "; _sbx; printf '%s\\n' \"${COMPREPLY[@]}\" | sort | tr '\\n' ' '"
		out, err := exec.Command("bash", "-c", script).CombinedOutput()
		if got := strings.TrimSpace(string(out)); err != nil || got != tc.want {
			t.Errorf("completing %q: %q (%v), want %q", tc.words, got, err, tc.want)
		}
	}
}

func quoteWords(ws []string) string {
	var q []string
	for _, w := range ws {
		q = append(q, "'"+w+"'")
	}
	return strings.Join(q, " ")
}
