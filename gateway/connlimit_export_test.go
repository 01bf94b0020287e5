package gateway

// ForwardedClient is forwardedClient, for the external tests.
var ForwardedClient = forwardedClient
