package snapshot

import (
	"strconv"
	"strings"
)

// maxSafeInteger is the largest integer n such that n and n+1 are both exact IEEE-754 doubles
// (2^53-1, I-JSON's interoperable range, RFC 7493 section 2.2).
const maxSafeInteger = 1<<53 - 1

// checkNumber refuses a number literal (already matched by the JSON grammar) whose RFC 8785
// canonical form would not determine it: canonicalization reads every number as an IEEE-754
// double, so two different literals that read as the same double would share a digest. Refused:
//   - an integer literal (no fraction, no exponent) beyond ±(2^53-1);
//   - a literal whose value is not the value of the double it reads as (the shortest decimal
//     of that double, as RFC 8785 writes it, is another number): excess precision, underflow
//     of a non-zero literal to zero, overflow;
//   - negative zero ("-0", "-0.0", "-0e5"), which RFC 8785 writes as 0.
//
// Every literal accepted here has a canonical form that denotes exactly its value, so two
// accepted literals share a canonical form if and only if they are the same number.
func checkNumber(lit []byte) bool {
	s := string(lit)
	neg := strings.HasPrefix(s, "-")
	if neg {
		s = s[1:]
	}
	mant, exp, hasExp := strings.Cut(s, "e")
	if !hasExp {
		mant, exp, hasExp = strings.Cut(s, "E")
	}
	intPart, frac, hasFrac := strings.Cut(mant, ".")
	if !hasFrac && !hasExp {
		n, err := strconv.ParseUint(intPart, 10, 64)
		if err != nil || n > maxSafeInteger {
			return false
		}
		return !neg || n != 0
	}
	digits, e, ok := decimal(intPart, frac, exp)
	if !ok {
		return false
	}
	if digits == "" { // the literal is zero
		return !neg
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f == 0 { // overflow, or a non-zero literal that underflows to zero
		return false
	}
	short := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±x: the digits RFC 8785 writes
	sm, se, _ := strings.Cut(short, "e")
	si, sf, _ := strings.Cut(sm, ".")
	sd, sx, ok := decimal(si, sf, se)
	return ok && sd == digits && sx == e
}

// decimal normalises intPart.frac × 10^exp to digits × 10^e with no leading or trailing zero
// in digits ("" for zero). It fails on an exponent that does not fit nine digits, which no
// finite non-zero double within a bounded document needs.
func decimal(intPart, frac, exp string) (digits string, e int64, ok bool) {
	sign := int64(1)
	switch {
	case strings.HasPrefix(exp, "-"):
		sign, exp = -1, exp[1:]
	case strings.HasPrefix(exp, "+"):
		exp = exp[1:]
	}
	exp = strings.TrimLeft(exp, "0")
	if len(exp) > 9 {
		return "", 0, false
	}
	if exp != "" {
		x, err := strconv.ParseInt(exp, 10, 64)
		if err != nil {
			return "", 0, false
		}
		e = sign * x
	}
	all := intPart + frac
	e -= int64(len(frac))
	all = strings.TrimLeft(all, "0")
	trimmed := strings.TrimRight(all, "0")
	e += int64(len(all) - len(trimmed))
	if trimmed == "" {
		return "", 0, true
	}
	return trimmed, e, true
}
