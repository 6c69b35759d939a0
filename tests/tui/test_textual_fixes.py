"""A toast mounted after its notification expired must not freeze the UI (Textual 8.x hang)."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    import asyncio, time
    import evotui.tui.app  # applies evotui.tui.textual_fixes
    from textual.app import App
    from textual.notifications import Notification
    from textual.widgets._toast import Toast

    class Probe(App):
        pass

    async def main():
        app = Probe()
        async with app.run_test() as pilot:
            expired = Notification("gone", timeout=0.5, raised_at=time.time() - 10)
            await app.screen.mount(Toast(expired))
            for _ in range(5):
                await pilot.pause(0.01)
        print("responsive")

    asyncio.run(main())
''')


def test_an_expired_toast_does_not_hang_the_event_loop() -> None:
    # In a subprocess: without the fix the event loop spins forever and only a timeout ends it.
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "responsive" in proc.stdout
