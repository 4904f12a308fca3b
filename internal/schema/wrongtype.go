package schema

import "fmt"

// NotAList is what every command says of a list key that holds another
// type (kind, as TYPE names it): the same words from a w8y worker, w8y
// --status, w8yctl's verbs and the dashboard, instead of Redis' WRONGTYPE.
func (k Keys) NotAList(kind string) string {
	return fmt.Sprintf("%q holds a %s, not a list of items", k.List(), kind)
}
