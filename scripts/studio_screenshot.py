#!/usr/bin/env python3
"""Takes a picture of the studio, build/studio.png: tformer serve on
the main job's checkpoint, "We are friends." translated with beam 4 (3 best),
the encoder-decoder attention of the last layer, head 3 (or its last head).

    /usr/bin/python3 scripts/studio_screenshot.py [--checkpoint CK] [--out build/studio.png]

Needs what tests/apps/studio_browser.py needs (install-deps.sh --browser) and
Pillow, which keeps the picture small (64 colours)."""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "apps"))
import studio_browser as sb  # noqa: E402  the browser and server helpers of the browser test


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tformer", default="build/release/apps/tformer")
    p.add_argument("--checkpoint", default="runs/translate/checkpoint.safetensors")
    p.add_argument("--out", default="build/studio.png")
    a = p.parse_args()
    from PIL import Image
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    os.makedirs("build", exist_ok=True)
    log = open("build/studio-screenshot-serve.log", "w")
    server, url = sb.serve(a.tformer, a.checkpoint, [], log)
    d = sb.start_browser()
    try:
        d.set_window_size(1100, 1030)
        d.get(url)
        wait = WebDriverWait(d, 60)
        wait.until(lambda d: "parameters" in d.find_element(By.ID, "model-summary").text)
        text = d.find_element(By.ID, "text")
        text.clear()
        text.send_keys("We are friends.")
        text.send_keys(Keys.CONTROL, Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#results .result .translation"))
        # the grid: a row per layer, each its heads and their average
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#attention-grid .thumb"))
        cross = d.find_element(By.CSS_SELECTOR, "input[type=radio][value=decoder_cross]")
        d.execute_script("arguments[0].click()", cross)
        time.sleep(0.5)
        layers = len(d.find_elements(By.CSS_SELECTOR, "#attention-grid .row-head"))
        heads = len(d.find_elements(By.CSS_SELECTOR, "#attention-grid .col-head")) - 1  # and "average"
        name = f"Layer {layers}, head {min(3, heads)}"  # the last layer, head 3 (or its last)
        d.execute_script("arguments[0].click()", d.find_element(By.CSS_SELECTOR, f'#attention-grid .thumb[aria-label="{name}"]'))
        d.execute_script("window.scrollTo(0, 0)")
        time.sleep(0.5)
        full = "build/studio-screenshot.png"
        d.save_screenshot(full)
    finally:
        d.quit()
        server.terminate()
        server.wait()
    Image.open(full).convert("RGB").quantize(colors=64).save(a.out, optimize=True)
    print(f"studio_screenshot: {a.out}")


if __name__ == "__main__":
    main()
