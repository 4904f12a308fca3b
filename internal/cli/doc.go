// Package cli is the command-line plumbing that w8y and w8yctl share, so
// that the two commands read their options, explain a bad command line,
// print --help, the man page and shell completions, and report a failure
// alike:
//
//   - options.go lists a go-flags parser's options and writes them as
//     --help shows them;
//   - text.go wraps text to an 80-column terminal and lays out a list of
//     terms (options, verbs, exit codes) with their descriptions;
//   - exit.go is the type of a command's one table of exit codes, and its
//     rendering in --help and the man page;
//   - man.go writes a man page from a command's options and texts;
//   - complete.go is the one completion engine behind both commands' bash
//     completion scripts, over each command's grammar;
//   - explain.go turns go-flags' errors into one line in the user's words;
//   - fail.go prints the one line on stderr that explains a failure;
//   - version.go prints --version.
//
// What is a command's own (its options, its texts, its table's values,
// w8yctl's verbs) stays with the command.
package cli
