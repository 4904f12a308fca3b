package control

import (
	"os"
	"os/user"
	"strconv"
)

// Who is who gives an operator's command, as a pause, a cancel and every
// other change record it: user@host, the user being $USER, else the login
// name of the process's uid, else "uid N" (a container's uid without a
// passwd entry), and the host its name, else "unknown-host". One answer for
// every verb, so that the record of a pause and of a cancel by one person
// read alike.
func Who(getenv func(string) string) string {
	return who(getenv, func() (string, error) {
		u, err := user.Current()
		if err != nil {
			return "", err
		}
		return u.Username, nil
	}, os.Getuid(), os.Hostname)
}

// who is Who with what it reads passed in.
func who(getenv func(string) string, login func() (string, error), uid int, hostname func() (string, error)) string {
	name := getenv("USER")
	if name == "" {
		if n, err := login(); err == nil && n != "" {
			name = n
		}
	}
	if name == "" {
		name = "uid " + strconv.Itoa(uid)
	}
	host, err := hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
}
