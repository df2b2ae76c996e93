package controllers

import (
	"strings"
)

// clip bounds an identifier before it goes into a message.
func clip(s string) string { return clipN(s, 64) }

func clipN(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.ToValidUTF8(s[:n], "")
}
