package clock

import _ "embed"

// Lua is what a script that reads Redis' clock starts with (now.lua): the
// function redisNow, Redis' TIME in Unix milliseconds, with the script's
// effects replicated rather than its body. Every script of w8y that needs
// the time calls it, so that the fleet's one clock is read one way.
//
//go:embed now.lua
var Lua string
