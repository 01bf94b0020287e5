package registry

import (
	"context"
	"sort"
)

// HomeScanner is a Store that walks its homes in id order from a point,
// reading only as many records as its caller takes: a page of an admin
// list costs the page, not every home stored.
type HomeScanner interface {
	// ScanHomes calls fn with every home whose id sorts after after ("":
	// from the first), in id order, until fn returns false or ctx is
	// done. fn runs inside the store's read and must not call the store.
	ScanHomes(ctx context.Context, after string, fn func(Home) bool) error
}

// ScanHomes walks the homes of s in id order after after, through s's own
// scan when it has one, else over ListHomes (which reads every record).
func ScanHomes(ctx context.Context, s Store, after string, fn func(Home) bool) error {
	if sc, ok := s.(HomeScanner); ok {
		return sc.ScanHomes(ctx, after, fn)
	}
	hs, err := s.ListHomes(ctx)
	if err != nil {
		return err
	}
	i := sort.Search(len(hs), func(i int) bool { return hs[i].ID > after })
	for _, h := range hs[i:] {
		if !fn(h) {
			return nil
		}
	}
	return nil
}
