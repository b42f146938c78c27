// Package scripttest runs the data-driven scripts that test the broker's
// pure state machines (broker/group, broker/txn): each file in testdata is
// blocks of a command, a line "----" and the expected output, ended by a
// blank line; '#' lines between blocks are comments. With rewrite set, the
// files are rewritten with the output the commands give (the packages'
// -rewrite flag).
package scripttest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Run runs every testdata/*.txt script as a subtest: start makes a fresh
// harness for one script and returns the function that runs one command
// and returns its output.
func Run(t *testing.T, rewrite bool, start func(t *testing.T) func(cmd string) string) {
	t.Helper()
	files, err := filepath.Glob("testdata/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f, rewrite, start(t)) })
	}
}

type block struct {
	comments []string
	cmd      string
	want     string
}

func runScript(t *testing.T, path string, rewrite bool, run func(cmd string) string) {
	blocks := parse(t, path)
	var out strings.Builder
	for _, b := range blocks {
		for _, c := range b.comments {
			out.WriteString(c + "\n")
		}
		if b.cmd == "" {
			continue
		}
		got := run(b.cmd)
		if !rewrite && got != b.want {
			t.Errorf("%s: %s\n got:\n%s\nwant:\n%s", path, b.cmd, got, b.want)
		}
		fmt.Fprintf(&out, "%s\n----\n%s\n\n", b.cmd, got)
	}
	if rewrite {
		if err := os.WriteFile(path, []byte(strings.TrimRight(out.String(), "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parse(t *testing.T, path string) []block {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var blocks []block
	var comments []string
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			continue
		case strings.HasPrefix(l, "#"):
			comments = append(comments, l)
			continue
		}
		b := block{comments: comments, cmd: l}
		comments = nil
		if i+1 >= len(lines) || lines[i+1] != "----" {
			t.Fatalf("%s:%d: command %q is not followed by ----", path, i+1, l)
		}
		i += 2
		var out []string
		for ; i < len(lines) && lines[i] != ""; i++ {
			out = append(out, lines[i])
		}
		b.want = strings.Join(out, "\n")
		blocks = append(blocks, b)
	}
	if len(comments) > 0 {
		blocks = append(blocks, block{comments: comments})
	}
	return blocks
}

// Args parses a command's "k=v" words.
func Args(words []string) map[string]string {
	out := map[string]string{}
	for _, w := range words {
		k, v, _ := strings.Cut(w, "=")
		out[k] = v
	}
	return out
}
