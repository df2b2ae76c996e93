package snapshot

// Warning codes recorded on a ToolSnapshot. They are evidence for reviewers: text a model reads but
// a human reviewer may not see.
const (
	// WarnInvisibleUnicode marks zero-width, invisible formatting, tag or variation-selector
	// characters (e.g. U+200B, U+2060, U+FEFF, U+E0001-U+E007F).
	WarnInvisibleUnicode = "invisible_unicode"
	// WarnBidiControl marks bidirectional controls (U+202A-U+202E, U+2066-U+2069, U+200E,
	// U+200F, U+061C) that can reorder what a reviewer sees.
	WarnBidiControl = "bidi_control"
	// WarnControlCharacter marks C0/C1 control characters other than tab, newline and carriage
	// return.
	WarnControlCharacter = "control_character"
)

// unicodeFindings returns the distinct warning codes present in s, in a fixed order.
func unicodeFindings(s string) []string {
	var invisible, bidi, control bool
	for _, r := range s {
		if r < 0x80 {
			if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
				control = true
			}
			continue
		}
		switch {
		case r >= 0x80 && r <= 0x9f:
			control = true
		case isBidi(r):
			bidi = true
		case isInvisible(r):
			invisible = true
		}
	}
	var out []string
	if invisible {
		out = append(out, WarnInvisibleUnicode)
	}
	if bidi {
		out = append(out, WarnBidiControl)
	}
	if control {
		out = append(out, WarnControlCharacter)
	}
	return out
}

func isBidi(r rune) bool {
	return r == 0x061C || r == 0x200E || r == 0x200F ||
		(r >= 0x202A && r <= 0x202E) || (r >= 0x2066 && r <= 0x2069)
}

func isInvisible(r rune) bool {
	switch {
	case r == 0x00AD, r == 0x034F, r == 0x115F, r == 0x1160, r == 0x17B4, r == 0x17B5,
		r == 0x180E, r == 0x3164, r == 0xFEFF, r == 0xFFA0:
		return true
	case r >= 0x200B && r <= 0x200D:
		return true
	case r >= 0x2060 && r <= 0x2064:
		return true
	case r >= 0xFE00 && r <= 0xFE0F: // variation selectors
		return true
	case r >= 0xE0000 && r <= 0xE007F: // tag characters
		return true
	case r >= 0xE0100 && r <= 0xE01EF: // variation selectors supplement
		return true
	}
	return false
}
