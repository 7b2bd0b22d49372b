"""The admin console: a static web page (HTML, CSS, JavaScript modules; no build step) served
at `/console`, a client of the REST API in the browser with the operator's token."""
