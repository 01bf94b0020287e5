package fly

import "github.com/wakegate/wakegate/provider"

// specImage is the image a spec names for its version, if any.
func specImage(provider.Spec) string { return "" }
