"""The upload page in a real headless browser (Debian's chromium through Playwright): a model
uploaded through the form shows up in the job list, reaches 'done' with its artefact links, and
the page fetches nothing but the server's own API. Skipped with the reason where the browser is
missing, unless OPBRIDGE_REQUIRE_BROWSER=1."""

from __future__ import annotations

from .helpers import Server


def test_upload_through_the_page(browser, small_onnx, tmp_path):
    server = Server(tmp_path / "data", "--workers", "1")
    page = browser.new_page()
    page.set_default_timeout(60_000)
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    try:
        page.goto(server.url + "/", wait_until="load")
        page.set_input_files("input[name=model]", str(small_onnx))
        page.fill("input[name=input_shape]", "image=1,3,16,16")
        page.click("button:has-text('Submit')")
        page.wait_for_function("document.getElementById('msg').textContent !== ''", timeout=20_000)
        assert page.text_content("#msg").startswith("queued"), page.text_content("#msg")
        job_id = page.text_content("#msg").split()[-1]
        row = page.locator(f"#jobs tr:has-text('{job_id}')")
        row.locator("td.done").wait_for()
        assert "PASS" in row.text_content() and "small_cnn.onnx" in row.text_content()
        assert row.locator("a", has_text="report.html").get_attribute("href") == f"/api/jobs/{job_id}/report.html"
        row.locator("button", has_text="delete").click()
        row.wait_for(state="detached")
        assert server.client.get(f"/api/jobs/{job_id}").status_code == 404
    finally:
        page.close()
        server.stop()
    assert not errors
    assert requests and all(u.startswith(server.url + "/") for u in requests), requests
