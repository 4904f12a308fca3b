package childcmd

import "testing"

// TestItemInScript: {} inside (or as) the script of a shell's -c is found,
// however the shell is started and whatever options come before the
// script; {} as an argument of its own, in a script without -c, or in a
// program that is no shell, is not.
func TestItemInScript(t *testing.T) {
	tests := []struct {
		name  string
		argv  []string
		shell string
	}{
		{"sh -c", []string{"sh", "-c", "echo {}"}, "sh"},
		{"a path", []string{"/bin/sh", "-c", "echo {}"}, "sh"},
		{"bash with options first", []string{"bash", "--norc", "-euo", "pipefail", "-c", "report {}"}, "bash"},
		{"a bundle that ends in c", []string{"bash", "-ec", "report {}"}, "bash"},
		{"-c before other options", []string{"sh", "-c", "-e", "report {}"}, "sh"},
		{"set -o before -c", []string{"sh", "-o", "errexit", "-c", "report {}"}, "sh"},
		{"-- before the script", []string{"dash", "-c", "--", "report {}"}, "dash"},
		{"the item is the script", []string{"sh", "-c", "{}"}, "sh"},
		{"inside a word", []string{"zsh", "-c", "cp /data/{}.csv /out/"}, "zsh"},
		{"ksh", []string{"ksh", "-c", "echo {}"}, "ksh"},
		{"through env", []string{"env", "-i", "PATH=/bin", "sh", "-c", "echo {}"}, "sh"},
		{"through /usr/bin/env", []string{"/usr/bin/env", "bash", "-c", "echo {}"}, "bash"},
		{"busybox sh", []string{"busybox", "sh", "-c", "echo {}"}, "sh"},
		{"busybox ash", []string{"/bin/busybox", "ash", "-c", "echo {}"}, "ash"},
		{"behind timeout", []string{"timeout", "60", "sh", "-c", "echo {}"}, "sh"},
		{"fish --command=", []string{"fish", "--command=echo {}"}, "fish"},
		{"fish -C then -c", []string{"fish", "-C", "set x 1", "-c", "echo {}"}, "fish"},
		{"the safe form", []string{"sh", "-c", `echo "$1"`, "sh", "{}"}, ""},
		{"W8Y_ITEM", []string{"sh", "-c", `echo "$W8Y_ITEM"`}, ""},
		{"a script file", []string{"sh", "./report.sh", "{}"}, ""},
		{"no -c", []string{"bash", "-e", "report {}.sh"}, ""},
		{"no shell", []string{"printf", "%s\n", "item={}"}, ""},
		{"a program named like no shell", []string{"shx", "-c", "echo {}"}, ""},
		{"-c of another program", []string{"gcc", "-c", "{}.c"}, ""},
		{"a shell's -o value is no script", []string{"bash", "-o", "{}"}, ""},
		{"-c without a script", []string{"sh", "-c"}, ""},
	}
	for _, tt := range tests {
		got := ItemInScript(tt.argv)
		switch {
		case tt.shell == "" && got != nil:
			t.Errorf("%s: %q: found {} in the script %q of %s", tt.name, tt.argv, got.Script, got.Shell)
		case tt.shell != "" && got == nil:
			t.Errorf("%s: %q: {} not found", tt.name, tt.argv)
		case tt.shell != "" && got.Shell != tt.shell:
			t.Errorf("%s: %q: found in %s, want %s", tt.name, tt.argv, got.Shell, tt.shell)
		}
	}
}
