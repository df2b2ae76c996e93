package activation

import "github.com/b10x/connector-mcp/refusal"

// clip bounds an identifier before it goes into a message (64 bytes, no marker: see clipN).
func clip(s string) string { return clipN(s, 64) }

// clipN bounds s to n bytes with no marker (refusal.Truncate): the values land in status fields
// whose schema sets a maxLength, which a marker would overrun.
func clipN(s string, n int) string { return refusal.Truncate(s, n) }
