package gateway_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/wakegate/wakegate/internal/testbin"
)

// realJupyter is Debian's Jupyter Notebook (apt-get install
// jupyter-notebook).
const realJupyter = "/usr/bin/jupyter-notebook"

// realJupyterCell runs code in the notebook's first cell and waits for
// its output to contain want.
func realJupyterCell(code, want string) chromedp.Action[chromedp.Void] {
	return chromedp.Steps(
		realPoll(`typeof Jupyter !== "undefined" && Jupyter.notebook && Jupyter.notebook.kernel &&
			Jupyter.notebook.kernel.is_connected()`, 40*time.Second),
		chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(function(){var c = Jupyter.notebook.get_cell(0);
			c.set_text(%q); c.output_area.clear_output(); c.execute();})()`, code)),
		realPoll(fmt.Sprintf(`(function(){var o = document.querySelector(".output_area .output_text");
			return !!o && o.textContent.indexOf(%q) >= 0})()`, want), 20*time.Second),
	)
}

// TestRealAppJupyter runs Debian's Jupyter Notebook in a sleeping home
// under host routing, with no origin flag (allow_remote_access is the
// same for every deployment: Jupyter otherwise answers 403 to any Host
// but localhost and addresses, nb.localhost among them): Chromium opens the tree cold,
// creates a notebook through the page's own API call, and runs a cell over
// the kernel WebSocket through the gateway. With the notebook open past
// the home's idle timeout the home stays up (the kernel socket is a
// session); once the tab is closed the home suspends, and opening the
// notebook again wakes it and runs a cell again.
func TestRealAppJupyter(t *testing.T) {
	realTimed(t)
	if _, err := os.Stat(realJupyter); err != nil {
		realNeed(t, "jupyter-notebook is not installed")
	}
	a, port := realGateway(t, "auto", fmt.Sprintf(`hosts:
  apps_domain: localhost
homes:
  - id: nb
    idle_timeout: 3s
    command: [%q, "--no-browser", "--allow-root", "--ip=127.0.0.1", "--port={port}", "--port-retries=0",
      "--NotebookApp.token=", "--NotebookApp.password=", "--NotebookApp.allow_remote_access=True"]
apps:
  - slug: nb
    home: nb
`, realJupyter))
	browser := realBrowser(t, "jupyter.png")
	ctx, closeTab := realTab(t, browser)
	base := "http://nb.localhost:" + port

	start := time.Now()
	var created string
	err := chromedp.Do(ctx,
		chromedp.Navigate(base+"/tree"),
		realPoll(`typeof Jupyter !== "undefined" && !!Jupyter.notebook_list && !!document.querySelector("#notebook_list")`, 50*time.Second))
	if err != nil {
		t.Fatalf("cold tree: %v\n%s", err, a.logs.String())
	}
	t.Logf("cold tree: %v", time.Since(start).Round(time.Millisecond))
	// What the tree's New > Python 3 does, without the new tab it opens.
	created, err = chromedp.Run(ctx, chromedp.Evaluate[string](`(async function(){
		var xsrf = (document.cookie.match(/_xsrf=([^;]*)/) || [])[1] || "";
		var r = await fetch("/api/contents", {method: "POST", credentials: "same-origin",
			headers: {"Content-Type": "application/json", "X-XSRFToken": decodeURIComponent(xsrf)},
			body: JSON.stringify({type: "notebook"})});
		if (!r.ok) return "status " + r.status + ": " + (await r.text());
		return (await r.json()).path;
	})()`, chromedp.EvalAwaitPromise))
	if err != nil || !strings.HasSuffix(created, ".ipynb") {
		t.Fatalf("create a notebook: %q, %v\n%s", created, err, a.logs.String())
	}
	notebook := base + "/notebooks/" + created
	start = time.Now()
	err = chromedp.Do(ctx, chromedp.Navigate(notebook), realJupyterCell("print(6 * 7)", "42"))
	if err != nil {
		t.Fatalf("run a cell: %v\n%s", err, a.logs.String())
	}
	t.Logf("open the notebook and run a cell: %v", time.Since(start).Round(time.Millisecond))

	// Past the idle timeout with the tab open: the kernel's socket keeps
	// the home up.
	time.Sleep(5 * time.Second)
	if status, sessions := realHomeStatus(t, a, "nb"); status != "running" || sessions < 1 {
		t.Fatalf("with the notebook open past the idle timeout: status %q, %d sessions", status, sessions)
	}
	closeTab()
	testbin.Eventually(t, "the home suspends once the tab is closed", func() bool {
		status, _ := realHomeStatus(t, a, "nb")
		return status == "suspended"
	})

	ctx, _ = realTab(t, browser)
	start = time.Now()
	err = chromedp.Do(ctx, chromedp.Navigate(notebook), realJupyterCell("print(7 * 8)", "56"))
	if err != nil {
		t.Fatalf("reopen: %v\n%s", err, a.logs.String())
	}
	t.Logf("reopen cold and run a cell: %v", time.Since(start).Round(time.Millisecond))
}
