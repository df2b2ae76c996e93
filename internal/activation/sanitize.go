package activation

import "net/url"

// SanitizeURL renders a URL for conditions, events and logs: scheme, host, port and path only.
func SanitizeURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(invalid URL)"
	}
	return clipN((&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String(), 256)
}
