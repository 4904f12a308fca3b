package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/w8y/w8y/internal/proc"
)

// badInterpreter is a script whose #! line names an interpreter that is
// missing or cannot be run. execve fails for it with ENOENT, as if the
// script itself were missing; shells say "bad interpreter" instead.
type badInterpreter struct {
	script, interpreter string
	err                 error
}

func (e *badInterpreter) Error() string {
	return fmt.Sprintf("%q: bad interpreter %s: %v", e.script, e.interpreter, e.err)
}

// Is makes a missing interpreter exit as a missing executable does (127,
// as bash, env and timeout do), and one that cannot be run as an
// executable that cannot be run (126).
func (e *badInterpreter) Is(target error) bool {
	if errors.Is(e.err, fs.ErrNotExist) {
		return target == proc.ErrNotFound
	}
	return target == proc.ErrNotExecutable
}

// shebangLen is how much of a script the kernel reads for its #! line
// (BINPRM_BUF_SIZE).
const shebangLen = 256

// checkInterpreter checks the interpreter of path, when it is a script
// with a #! line, so that a missing one is reported before any item is
// taken rather than charged to the first item as its failure. A file that
// cannot be read, or has no #! line, is left to execve.
func checkInterpreter(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	head := make([]byte, shebangLen)
	n, _ := f.Read(head)
	line, found := bytes.CutPrefix(head[:n], []byte("#!"))
	if !found {
		return nil
	}
	line, _, _ = bytes.Cut(line, []byte("\n"))
	fields := bytes.Fields(line)
	if len(fields) == 0 {
		return nil
	}
	interpreter := string(fields[0])
	info, err := os.Stat(interpreter)
	switch {
	case err != nil:
		var perr *fs.PathError
		if errors.As(err, &perr) {
			err = perr.Err
		}
		return &badInterpreter{script: path, interpreter: interpreter, err: err}
	case info.IsDir():
		return &badInterpreter{script: path, interpreter: interpreter, err: errors.New("is a directory")}
	case info.Mode().Perm()&0o111 == 0:
		return &badInterpreter{script: path, interpreter: interpreter, err: fs.ErrPermission}
	}
	return nil
}
