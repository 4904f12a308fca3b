package schema

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNoList is a list key that does not exist: a mistyped prefix, or a list
// that nobody has filled yet. Redis keeps no empty list, so an emptied list
// is one too. A one-shot run, a --until-idle one, --status and w8yctl's
// verbs end with it (an exit code of its own); a --continuous worker warns
// and waits for the list.
var ErrNoList = errors.New("the list does not exist")

// NoListError is ErrNoList for one list, in the words that every command
// uses for it.
type NoListError struct{ List string }

func (e *NoListError) Error() string {
	return fmt.Sprintf("the list %q does not exist or is empty: is --key-prefix (W8Y_KEY_PREFIX) right?", e.List)
}

func (e *NoListError) Is(target error) bool { return target == ErrNoList }

// NoList is the error of k's list when it does not exist.
func (k Keys) NoList() error { return &NoListError{List: k.List()} }

// BlankPrefix says, for a prefix that is empty or blank (spaces and colons
// alone, as -k ' ' or W8Y_KEY_PREFIX=: give), which keys it names: the
// list and the locks at the top of the database, or nearly, which every
// other program of the database may use too. It returns "" for any other
// prefix. w8y and w8yctl say it once, at start.
func (k Keys) BlankPrefix() string {
	if strings.Trim(k.Prefix, " \t:") != "" {
		return ""
	}
	if k.Prefix == "" {
		return fmt.Sprintf("no --key-prefix (W8Y_KEY_PREFIX): the list is %q and the locks %q, at the top of the database", k.List(), k.Lock("<item>"))
	}
	return fmt.Sprintf("--key-prefix (W8Y_KEY_PREFIX) %q is blank: the list is %q and the locks %q", k.Prefix, k.List(), k.Lock("<item>"))
}
