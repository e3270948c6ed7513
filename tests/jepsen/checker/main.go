// Command zipg-check checks a recorded zipg history (JSON lines) for
// linearizability with porcupine. See ../README.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/anishathalye/porcupine"
)

// Exit codes.
const (
	exitOk        = 0
	exitViolation = 1
	exitBadInput  = 2
	exitUnknown   = 3
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("zipg-check", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 60*time.Second, "give up after this long (exit 3); 0 means no limit")
	htmlPath := fs.String("html", "", "write porcupine's visualization to this HTML file")
	asJSON := fs.Bool("json", false, "print the result as one JSON object")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: zipg-check [--timeout 60s] [--html out.html] [--json] HISTORY.jsonl")
		fs.PrintDefaults()
	}
	var files []string
	for { // flags may come before or after the file
		if err := fs.Parse(args); err != nil {
			return exitBadInput
		}
		if fs.NArg() == 0 {
			break
		}
		files, args = append(files, fs.Arg(0)), fs.Args()[1:]
	}
	if len(files) != 1 {
		fs.Usage()
		return exitBadInput
	}
	f, err := os.Open(files[0])
	if err != nil {
		fmt.Fprintf(stderr, "zipg-check: %v\n", err)
		return exitBadInput
	}
	h, err := ParseHistory(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "zipg-check: %s: %v\n", files[0], err)
		return exitBadInput
	}

	rep, model, info := Check(h, *timeout)
	if *htmlPath != "" {
		if err := porcupine.VisualizePath(model, info, *htmlPath); err != nil {
			fmt.Fprintf(stderr, "zipg-check: writing %s: %v\n", *htmlPath, err)
			return exitBadInput
		}
	}
	verdict, code := "NOT linearizable", exitViolation
	if rep.Linearizable {
		verdict, code = "linearizable", exitOk
	} else if rep.Unknown {
		verdict, code = fmt.Sprintf("unknown (timed out after %v)", *timeout), exitUnknown
	}
	if *asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return code
	}
	fmt.Fprintf(stdout, "operations: %d (ok %d, fail %d, info %d)\nkeys: %d\n",
		rep.Operations, rep.Ok, rep.Fail, rep.Info, rep.Keys)
	if len(rep.BadKeys) > 0 {
		fmt.Fprintf(stdout, "not linearizable: %s\n", strings.Join(rep.BadKeys, " "))
	}
	if *htmlPath != "" {
		fmt.Fprintf(stdout, "visualization: %s\n", *htmlPath)
	}
	fmt.Fprintf(stdout, "verdict: %s\n", verdict)
	return code
}
