package dashboard

import (
	"context"
	"errors"

	"github.com/w8y/w8y/internal/control"
)

// actionReply is the reply to every action: which it was and what it did
// to each item, as w8yctl's verbs report it (control.Result), so that the
// page reads every reply alike.
type actionReply struct {
	Action  string           `json:"action"`
	Results []control.Result `json:"results"`
}

// errTheItem refuses a request without its item.
var errTheItem = errors.New("give the item")

func isRefused(err error) bool { return errors.Is(err, control.ErrRefused) }

// add appends the item to the list, if the list does not hold it yet. A
// missing list is refused, as w8yctl add refuses it without --create: the
// page shows an existing list.
func (s *Server) add(ctx context.Context, a action) ([]control.Result, error) {
	return s.Fleet.Add(ctx, []string{a.Item}, false)
}

// remove removes the item from the list, with its cooldown, backoff, pause
// and state, as w8yctl remove does; a run under way is left to finish.
func (s *Server) remove(ctx context.Context, a action) ([]control.Result, error) {
	return s.Fleet.Remove(ctx, []string{a.Item})
}

// cancel asks the run that holds the item's lock to stop, with the reason
// the operator typed, recorded as asked by s.Fleet.Who(), as every action
// of the page is.
func (s *Server) cancel(ctx context.Context, a action) ([]control.Result, error) {
	req, err := control.CancelBy(ctx, s.Fleet.Client, s.Fleet.Keys, a.Item, a.Reason, s.Fleet.Who(), a.AsFailure)
	if err != nil {
		return nil, err
	}
	return []control.Result{{Item: a.Item, Changed: 1, Holder: &req.Holder}}, nil
}
