package proc

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// LookPath finds the executable name as execvp(3), env(1) and the shells
// do, so that a missing or unrunnable one is reported before any item is
// taken: a name with a slash is a path, any other is looked up in PATH. A
// name that PATH holds only as something that cannot be run (a file without
// the run bit, a directory, as "." always is) cannot be run (126), as
// execvp's EACCES says, rather than not found (127). A script whose #!
// interpreter is missing or cannot be run is refused the same way.
func LookPath(name string) (string, error) {
	path, err := exec.LookPath(name)
	switch {
	case err == nil:
	case errors.Is(err, exec.ErrNotFound) && !strings.Contains(name, "/"):
		if found := unrunnableInPath(name); found != "" {
			return "", fmt.Errorf("%w: %q: %s", ErrNotExecutable, name, found)
		}
		return "", fmt.Errorf("%w: %q", ErrNotFound, name)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("%w: %q", ErrNotFound, name)
	default:
		// It exists, but is a directory or lacks the run bit.
		var eerr *exec.Error
		if errors.As(err, &eerr) {
			err = eerr.Err
		}
		return "", fmt.Errorf("%w: %q: %w", ErrNotExecutable, name, err)
	}
	if err := checkInterpreter(path); err != nil {
		return "", err
	}
	return path, nil
}

// unrunnableInPath says what name is in the first directory of PATH that
// has it, as exec.LookPath searches them, or returns "". Call it once
// LookPath found nothing it could run: whatever is there cannot be run.
func unrunnableInPath(name string) string {
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" {
			dir = "." // an empty entry is the working directory
		}
		path := filepath.Join(dir, name)
		info, err := os.Stat(path)
		switch {
		case err != nil:
		case info.IsDir():
			return path + " is a directory"
		default:
			return path + " is not executable"
		}
	}
	return ""
}

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
		return target == ErrNotFound
	}
	return target == ErrNotExecutable
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
