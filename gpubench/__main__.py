from gpubench.config.user_code import without_current_folder

without_current_folder()  # before anything else imports: a folder's rich.py is not the library

from gpubench.cli import main  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(main())
