package snapshot

import (
	"bytes"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

// FuzzSafeNumberDeterminesValue: a number literal that canonicalization accepts has a canonical
// form denoting exactly its value. So two accepted literals share a digest if and only if they
// are the same number (digest equality is value equality, never a rounding accident).
func FuzzSafeNumberDeterminesValue(f *testing.F) {
	for _, s := range [][2]string{
		{"9007199254740993", "9007199254740992"}, {"1e-400", "0"}, {"-0", "0"}, {"0.1", "0.10"},
		{"333333333.33333329", "333333333.3333333"}, {"1E30", "1e+30"}, {"4.50", "4.5"}, {"-12", "-1.2e1"},
		{"5e-324", "4.9e-324"}, {"1.7976931348623157e308", "1.7976931348623158e308"}, {"0.0", "0e7"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		ca, va, ok := canonicalNumber(t, a)
		if !ok {
			return
		}
		if v := exactValue(t, string(ca)); v.Cmp(va) != 0 {
			t.Fatalf("%s canonicalizes to %s, another number", a, ca)
		}
		cb, vb, ok := canonicalNumber(t, b)
		if !ok {
			return
		}
		if bytes.Equal(ca, cb) != (va.Cmp(vb) == 0) {
			t.Fatalf("%s -> %s and %s -> %s: canonical equality and value equality disagree", a, ca, b, cb)
		}
	})
}

// canonicalNumber canonicalizes the single number literal lit; ok is false when lit is not one
// JSON number or is refused.
func canonicalNumber(t *testing.T, lit string) (canon []byte, value *big.Rat, ok bool) {
	var n json.Number
	dec := json.NewDecoder(bytes.NewReader([]byte(lit)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.More() {
		return nil, nil, false
	}
	if n, ok = v.(json.Number); !ok || string(n) != lit {
		return nil, nil, false
	}
	c, err := Canonicalize([]byte(lit))
	if err != nil {
		return nil, nil, false
	}
	return c, exactValue(t, lit), true
}

// exactValue is the exact rational value of an accepted number literal, computed from its
// normalised digits (big.Rat.SetString would expand a zero's large exponent, e.g. 0e999999999).
func exactValue(t *testing.T, lit string) *big.Rat {
	s, neg := strings.CutPrefix(lit, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	digits, e, ok := decimal(intPart, frac, exp)
	if !ok {
		t.Fatalf("accepted literal %s has no decimal form", lit)
	}
	if digits == "" {
		return new(big.Rat)
	}
	if e > 400 || e < -800 {
		t.Fatalf("accepted literal %s has exponent %d", lit, e)
	}
	n, _ := new(big.Int).SetString(digits, 10)
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(abs(e)), nil)
	r := new(big.Rat).SetInt(n)
	if e >= 0 {
		r.Mul(r, new(big.Rat).SetInt(p))
	} else {
		r.Quo(r, new(big.Rat).SetInt(p))
	}
	if neg {
		r.Neg(r)
	}
	return r
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
