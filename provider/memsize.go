package provider

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// MemorySize is a memory size in bytes: a JSON number, or a string of a
// number and a unit (K, M, G, T for powers of 1000; Ki, Mi, Gi, Ti, or KB
// and the like read as powers of 1024, as the kernel's own files do).
type MemorySize int64

// UnmarshalJSON reads a number of bytes or a string with a unit.
func (m *MemorySize) UnmarshalJSON(b []byte) error {
	var n json.Number
	if err := json.Unmarshal(b, &n); err == nil {
		v, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return fmt.Errorf("memory size %s: want a whole number of bytes", n)
		}
		*m = MemorySize(v)
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("memory size: want a number of bytes or a string such as \"256MiB\", got %s", b)
	}
	v, err := ParseMemorySize(s)
	if err != nil {
		return err
	}
	*m = MemorySize(v)
	return nil
}

// ParseMemorySize reads "256MiB", "1G", "512k" or "1048576".
func ParseMemorySize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], strings.TrimSpace(t[i:])
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("memory size %q: want a number and a unit such as 256MiB", s)
	}
	mult := map[string]float64{
		"": 1, "b": 1,
		"k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12,
		"ki": 1 << 10, "mi": 1 << 20, "gi": 1 << 30, "ti": 1 << 40,
		"kb": 1 << 10, "mb": 1 << 20, "gb": 1 << 30, "tb": 1 << 40,
		"kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
	}[strings.ToLower(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("memory size %q: unknown unit %q (want K, M, G, Ki, Mi, Gi, KiB, MiB or GiB)", s, unit)
	}
	v := f * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("memory size %q: too large", s)
	}
	return int64(v), nil
}
