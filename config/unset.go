package config

import "time"

// unset is the part of a file where leaving a field out differs from
// setting it to zero: those fields decoded a second time, as pointers, so
// that defaults can tell "unset" (nil) from zero. It lives only inside
// Load; the Config that Load returns holds plain values, every unset one
// filled with its default.
type unset struct {
	Log struct {
		Access *bool `yaml:"access"`
	} `yaml:"log"`
	Server struct {
		MinBodyRate     *ByteSize `yaml:"min_body_rate"`
		MinResponseRate *ByteSize `yaml:"min_response_rate"`
		GCHeadroom      *ByteSize `yaml:"gc_headroom"`
	} `yaml:"server"`
	Proxy struct {
		MaxConnsPerHome  *int      `yaml:"max_conns_per_home"`
		BodyBuffer       *ByteSize `yaml:"body_buffer"`
		BodySpool        *ByteSize `yaml:"body_spool"`
		BodyBudgetClient *ByteSize `yaml:"body_budget_client"`
		BodyBudgetTotal  *ByteSize `yaml:"body_budget_total"`
	} `yaml:"proxy"`
	Wake struct {
		Hold        *time.Duration `yaml:"hold"`
		IdleTimeout *time.Duration `yaml:"idle_timeout"`
		Probe       struct {
			PortWatch *time.Duration `yaml:"port_watch"`
		} `yaml:"probe"`
	} `yaml:"wake"`
	Admin struct {
		Listen *string `yaml:"listen"`
		Socket *string `yaml:"socket"`
	} `yaml:"admin"`
	TLS struct {
		HTTPListen *string `yaml:"http_listen"`
	} `yaml:"tls"`
	Homes []unsetHome `yaml:"homes"`
}

// unsetHome is unset's part of one home.
type unsetHome struct {
	SocketActivation *bool          `yaml:"socket_activation"`
	IdleTimeout      *time.Duration `yaml:"idle_timeout"`
}

// home is home i's part; all unset when the file's homes did not decode.
func (u *unset) home(i int) unsetHome {
	if i < len(u.Homes) {
		return u.Homes[i]
	}
	return unsetHome{}
}

// defUnset sets *p to v when the file left the field out (set is nil); a
// field the file set keeps its value, zero included.
func defUnset[T any](p *T, set *T, v T) {
	if set == nil {
		*p = v
	}
}
