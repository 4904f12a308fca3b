// Package jobctl routes the signals that w8y receives to its running
// children, turns stop signals into a stop request, and does terminal job
// control for them: Ctrl-Z, fg and bg stop and continue w8y together with
// its children, which run in process groups of their own that the terminal
// does not know belong to w8y.
//
// It knows the children through internal/proc, and what keeps each child's
// lock alive only as a Pausable: something that can be paused while w8y is
// stopped, and resumed, or found lost, once w8y is continued. It knows
// nothing of locks or of Redis.
//
// Start sets all of this up for a worker, with the spawner and the reaper
// of internal/proc, as a Process that Close takes down.
package jobctl
