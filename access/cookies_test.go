package access

import (
	"net/http"
	"reflect"
	"testing"
)

// StripCookies removes the named cookies from every Cookie field, keeps
// the rest as sent (values Go's parser refuses included) and the kept name.
func TestStripCookies(t *testing.T) {
	names := []string{"staff", "wg_token"}
	for _, c := range []struct {
		in, want []string
		keep     string
	}{
		{[]string{"a=1; wg_token=x; b=2"}, []string{"a=1; b=2"}, ""},
		{[]string{"wg_token=x"}, nil, ""},
		{[]string{"wg_token=x", "c=\"q v\"; staff=y"}, []string{"c=\"q v\""}, ""},
		{[]string{"a=1;wg_token=x ;  b=2"}, []string{"a=1; b=2"}, ""},
		{[]string{"a=1; wg_token=x; staff=y"}, []string{"a=1; wg_token=x"}, "wg_token"},
		{[]string{"my_wg_token=1; wg_token_old=2"}, []string{"my_wg_token=1; wg_token_old=2"}, ""},
		{[]string{"a=1"}, []string{"a=1"}, ""},
	} {
		h := http.Header{"Cookie": c.in}
		StripCookies(h, names, c.keep)
		if got := h["Cookie"]; !reflect.DeepEqual(got, c.want) {
			t.Errorf("StripCookies(%q, keep %q) = %q; want %q", c.in, c.keep, got, c.want)
		}
	}
}
